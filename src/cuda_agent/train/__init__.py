"""Training (SPEC §4): RFT data and engine-neutral episodes here; a single-GPU path on TRL (`trl/`) and
a cluster path on verl (`verl/`). The engines are optional extras, never imported here.
"""

from .config import ModelConfig, RFTConfig, RLConfig, load_config
from .metrics import episode_metrics, ratio_metrics
from .rft import RFTFilterConfig, RFTReport, build_rft_dataset, filter_trajectories, load_sft_rows

__all__ = ["RFTFilterConfig", "RFTReport", "filter_trajectories", "build_rft_dataset", "load_sft_rows",
           "RLConfig", "RFTConfig", "ModelConfig", "load_config", "episode_metrics", "ratio_metrics"]
