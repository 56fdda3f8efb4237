"""Stage 4, frames and problems -> rows of the output tables: the rows (``rows``), the tables' schemas
(``table_schemas``) and folders (``table_sets``), the bodies decoded (``frame_decoding``, ``bodies``),
Fetch and Produce joined with their responses (``joins``), topic names for topic ids (``topic_names``),
and the columns cut into Arrow batches (``column_table``, ``record_table``)."""
