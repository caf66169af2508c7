"""Tutorial 004 from Python: sinusoidal positions added to a random
(2, 10, 128) batch, then one post-norm encoder layer (8 heads, feed-forward
512, separate Q/K/V projections, no dropout), as examples/encoder_layer.c."""
import numpy as np

import tfm

rng = np.random.default_rng(0)
x = rng.standard_normal((2, 10, 128), dtype=np.float32)

params = tfm.Params()
layer = tfm.EncoderLayer(params, 'encoder_layer', rng=tfm.Rng(0), d_model=128, heads=8,
                         d_ff=512, dropout=0.0, fused_qkv=0).eval()
positions = tfm.SinusoidalPositions(5000, 128)
with tfm.Tape(recording=False):  # inference: no gradients
    out = layer(positions(x)).numpy()
print('Output shape: (%d, %d, %d)' % out.shape)
print('parameters: %d; output mean %.4f, std %.4f' % (params.numel(), out.mean(), out.std()))
