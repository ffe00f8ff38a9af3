"""Generation jobs: a plan (groups × labels × statements per cell) run by a decoder into sharded files."""

from toxiforge.pipeline.job import (JobConfig, JobModels, JobResult, OpenJob, check_output_dir, finish_job,
                                    generate_shard, open_job, run_generation)
from toxiforge.pipeline.plan import Cell, GenerationPlan, WorkItem, row_seed

__all__ = ["Cell", "GenerationPlan", "JobConfig", "JobModels", "JobResult", "OpenJob", "WorkItem", "check_output_dir",
           "finish_job", "generate_shard", "open_job", "row_seed", "run_generation"]
