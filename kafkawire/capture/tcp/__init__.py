"""Stage 2, one connection's packets -> in-order stream pieces per direction (``tcp_reassembly``)."""
