"""Generation jobs: a plan (groups × labels × statements per cell) run by a decoder into sharded files."""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "JobConfig": "manifest:JobConfig", "JobModels": "manifest:JobModels", "JobResult": "job:JobResult",
    "OpenJob": "manifest:OpenJob", "check_output_dir": "manifest:check_output_dir", "finish_job": "job:finish_job",
    "generate_shard": "job:generate_shard", "open_job": "manifest:open_job", "run_generation": "job:run_generation",
    "Generator": "generator:Generator",
    "RunInterrupted": "job:RunInterrupted",
    "Cell": "plan:Cell", "GenerationPlan": "plan:GenerationPlan", "WorkItem": "plan:WorkItem",
    "plan_groups": "plan:plan_groups", "row_seed": "plan:row_seed",
})
