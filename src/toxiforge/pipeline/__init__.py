"""Generation jobs: a plan (groups × labels × statements per cell) run by a decoder into sharded files."""

from toxiforge.pipeline.job import JobConfig, JobResult, check_output_dir, run_generation
from toxiforge.pipeline.plan import Cell, GenerationPlan, WorkItem, row_seed

__all__ = ["Cell", "GenerationPlan", "JobConfig", "JobResult", "WorkItem", "check_output_dir", "row_seed", "run_generation"]
