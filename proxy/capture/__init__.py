"""Capture: ATDP records off the hot path, through a crash-safe spool, into the registry."""

from proxy.capture.spool import Spool
from proxy.capture.writer import CaptureRecord, CaptureWriter, WriterStats, commit_records

__all__ = ["CaptureRecord", "CaptureWriter", "Spool", "WriterStats", "commit_records"]
