"""The kernel: what two or more benchmark designs use and that names none of them.

Runner, result store, run-directory files, report files, LaTeX, tabular reading, text helpers,
statistics, errors and model providers. The kernel imports no design package.
"""
