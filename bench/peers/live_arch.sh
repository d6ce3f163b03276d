# Sourced: the architecture of issue 23's live model and the training settings its runs share, as tx-train flags (6+6, d512, 8 heads,
# d_ff 2048, Marian's layout: swish, [sin | cos] positions, output bias, LayerNorm eps 1e-6,
# tied embeddings), for the runs that start from tx's initialisation (live_model.sh INIT=tx,
# bench/gpu/live_model_gpu.sh).
live_arch=(--enc-layers 6 --dec-layers 6 --d-model 512 --d-ff 2048 --heads 8
  --ffn-activation swish --positions halves --output-bias --norm-eps 1e-6 --tied-embeddings all)
# The settings every live-model run shares (live_model.sh, bench/gpu/live_model_gpu.sh): the
# linear schedule, clipping at 5, label smoothing 0.1, 4,096 padded tokens a batch, seed 1;
# the rate, warm-up, dropout and epochs are each script's to set.
live_train=(--lr-schedule linear --clip-norm 5 --label-smoothing 0.1 --max-tokens 4096
  --early-stopping 0 --seed 1)
