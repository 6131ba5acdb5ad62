"""The trace contract: record kinds and fields (`schema`), the run header (`header`), the one
writer (`writer`: a buffered sink for the simulator, a flushing sink for live nodes) and the one
reader (`reader`). docs/trace-schema.md is generated from these modules."""
