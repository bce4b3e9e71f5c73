"""Static probes: bounded tree-sitter scans for the bug classes behind bitwise mismatches.

Public API (also used by the MCP server): ``probes.registry.all_probes()``,
``probes.scan.ScanRequest`` / ``probes.scan.run_scan()``, ``probes.sarif.to_sarif()``.
Findings are hypotheses for the reproducer stage, never verdicts.
"""
