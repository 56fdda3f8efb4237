"""Capture-file and packet-header layouts (pcap, pcapng, link layers, IP, TCP), pure and without I/O.

``layouts`` declares them with construct; readers and writers derive ``struct`` formats from there.
"""
