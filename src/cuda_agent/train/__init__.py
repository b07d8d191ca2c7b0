"""Training (SPEC §4): rejection fine-tuning data, a single-GPU path on TRL (RFT via SFTTrainer,
critic-free multi-turn RL via GRPOTrainer with our environment), and a cluster-scale path on
verl (an agent loop, dataset conversion, the four stage configs, a GPU evaluation pool).

The engines are optional extras (`train`, `verl`); nothing here imports them at module level.
"""

from .config import ModelConfig, RFTConfig, RLConfig, load_config
from .metrics import episode_metrics, ratio_metrics
from .rft import RFTFilterConfig, RFTReport, build_rft_dataset, filter_trajectories, load_sft_rows

__all__ = ["RFTFilterConfig", "RFTReport", "filter_trajectories", "build_rft_dataset", "load_sft_rows",
           "RLConfig", "RFTConfig", "ModelConfig", "load_config", "episode_metrics", "ratio_metrics"]
