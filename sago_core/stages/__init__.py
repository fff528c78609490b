"""One function per pipeline stage: DataFrames in, DataFrame out. Tasks wrap these 1:1."""
