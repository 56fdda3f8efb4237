"""``kafkawire report DIR --html FILE``: the report as one self-contained page of charts beside the text
report's tables. The charts' figures are aggregated before plotting (``series``: time buckets, tallies
and their shaping, defined once), computed by either engine (``series_arrow`` here with pyarrow and
numpy, ``capture_spark.report_html_spark`` with Spark SQL), drawn with plotly (``charts``) and laid out
on the page with the JavaScript inlined (``page``), so the page opens without network access and its
size does not grow with the capture's."""
