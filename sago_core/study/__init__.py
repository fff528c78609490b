"""Does a result on one out-of-distribution dataset predict another?

The study and its statistics are described in docs/method.md.
"""
