"""``kafkawire report``: a summary of decoded tables (``report``), its figures with pyarrow on this
process (``report_arrow``), and transactions as the capture shows them (``transactions``)."""
