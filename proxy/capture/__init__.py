"""Capture: ATDP records off the hot path, through a crash-safe spool, into the registry."""

from proxy.capture.records import CaptureRecord, commit_records
from proxy.capture.spool import Spool
from proxy.capture.writer import CaptureWriter, WriterStats

__all__ = ["CaptureRecord", "CaptureWriter", "Spool", "WriterStats", "commit_records"]
