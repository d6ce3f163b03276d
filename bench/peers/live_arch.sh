# Sourced: the architecture of issue 23's live model as tx-train flags (6+6, d512, 8 heads,
# d_ff 2048, Marian's layout: swish, [sin | cos] positions, output bias, LayerNorm eps 1e-6,
# tied embeddings), for the runs that start from tx's initialisation (live_model.sh INIT=tx,
# bench/gpu/live_model_gpu.sh).
live_arch=(--enc-layers 6 --dec-layers 6 --d-model 512 --d-ff 2048 --heads 8
  --ffn-activation swish --positions halves --output-bias --norm-eps 1e-6 --tied-embeddings all)
