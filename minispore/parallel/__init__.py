"""`minispore.parallel`: layouts, strategy files and distributed checkpoints (MindSpore's names).

    from minispore.parallel import Layout
    layout = Layout((2, 2), ("dp", "mp"))
    w_layout = layout("mp", "None")              # dim 0 split over "mp", dim 1 whole

* `layout`: `Layout` and the slice algebra (`slice_bounds`, `shard_of`, `assemble`, `replica_groups`).
* `strategy_file`: MindSpore's JSON strategy files (`save_strategy_file`, `build_searched_strategy`).
* `checkpoint_transform`: `transform_checkpoints`, `transform_checkpoint_by_rank`,
  `rank_list_for_transform`, `merge_sliced_parameter`, `load_distributed_checkpoint`,
  `unified_safetensors` -- offline file work, no MPI needed.
* `checkpoint_set`: complete checkpoint sets (every rank's file and the strategy, committed by a
  manifest written last): `save_checkpoint_set`, `latest_complete_set`, `verify_checkpoint_set`.
* `recovery`: fault recovery for a training script under `msrun --auto-restart`:
  `resume_training`, `save_training_set`, `restart_attempt`, `use_compile_cache`.
* `megatron`: tensor parallelism written out in PyNative (Megatron-LM's f/g operators):
  `ColumnParallelDense`, `RowParallelDense`, `VocabParallelEmbedding`,
  `vocab_parallel_cross_entropy`, `gathered_parameters`, and sequence parallelism's region
  operators `GatherFromSequenceParallelRegion` / `ReduceScatterToSequenceParallelRegion`
  (minispore.llm.tensor_parallel applies them to LLaMA).

Layer: above train (it reads and writes checkpoints with train.serialization), below llm.
"""
from .layout import (Layout, assemble, check_shape, replica_groups, shard_of, shard_shape, slice_bounds,
                     slice_index)
from .strategy_file import (ParallelLayouts, build_searched_strategy, build_strategy, load_strategy_file,
                            save_strategy_file, tensor_parallel_layouts)
from .checkpoint_transform import (load_distributed_checkpoint, load_training_state, merge_sliced_parameter,
                                   rank_list_for_transform, training_state_dict, transform_checkpoint_by_rank,
                                   transform_checkpoints, unified_safetensors)
from .checkpoint_set import (CheckpointSet, CheckpointSetWriter, IncompleteCheckpointSetError,
                             latest_complete_set, save_checkpoint_set, verify_checkpoint_set)
from . import recovery
from .megatron import (ColumnParallelDense, CopyToModelParallelRegion, GatherFromModelParallelRegion,
                       GatherFromSequenceParallelRegion, ReduceFromModelParallelRegion,
                       ReduceScatterToSequenceParallelRegion, RowParallelDense, ScatterToModelParallelRegion,
                       VocabParallelEmbedding, gathered_parameters, sequence_chunk, vocab_parallel_cross_entropy)

__all__ = ["Layout", "assemble", "check_shape", "replica_groups", "shard_of", "shard_shape", "slice_bounds",
           "slice_index", "ParallelLayouts", "build_searched_strategy", "build_strategy", "load_strategy_file",
           "save_strategy_file", "load_distributed_checkpoint", "merge_sliced_parameter",
           "rank_list_for_transform", "transform_checkpoint_by_rank", "transform_checkpoints",
           "unified_safetensors", "training_state_dict", "load_training_state", "tensor_parallel_layouts",
           "ColumnParallelDense", "RowParallelDense", "VocabParallelEmbedding", "vocab_parallel_cross_entropy",
           "gathered_parameters", "CopyToModelParallelRegion", "ReduceFromModelParallelRegion",
           "GatherFromModelParallelRegion", "ScatterToModelParallelRegion",
           "GatherFromSequenceParallelRegion", "ReduceScatterToSequenceParallelRegion", "sequence_chunk",
           "CheckpointSet", "CheckpointSetWriter", "IncompleteCheckpointSetError", "latest_complete_set",
           "save_checkpoint_set", "verify_checkpoint_set", "recovery"]
