"""Task records and the loaders that build them from files, tables and datasets."""

from cuda_agent.tasks.loaders import (
    OPS6K_DATASET,
    LoadedTasks,
    OnError,
    load_hf_dataset,
    load_task_dir,
    load_task_file,
    load_task_table,
    load_tasks,
)
from cuda_agent.tasks.task import Task, TaskError
from cuda_agent.tasks.workloads import Workload, apply_workload

__all__ = [
    "OPS6K_DATASET",
    "LoadedTasks",
    "OnError",
    "Task",
    "TaskError",
    "Workload",
    "apply_workload",
    "load_hf_dataset",
    "load_task_dir",
    "load_task_file",
    "load_task_table",
    "load_tasks",
]
