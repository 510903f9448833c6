package stepmodel

import "cgtune/presets"

// addMTP appends the multi-token-prediction blocks the last pipeline stage
// runs after its decoder layers (MultiTokenPredictionLayer, MLM
// megatron/core/transformer/multi_token_prediction.py at the commit MB HEAD
// pins): per block the embedding of the shifted tokens, enorm and hnorm,
// their concatenation projected back to the hidden size (eh_proj), the
// block's layers (mtp_model_layer: one transformer layer, or a hybrid
// model's HybridStack of mtp_hybrid_override_pattern) and, after them,
// its own final norm, output layer and loss (process_mtp_loss). The
// layers are traced as decoder layers marked MTP; the prelude leads the
// first one's trace as ops of no cuda-graph scope (it is not part of
// mtp_model_layer, which is what a per-layer graph holds); the head joins
// the stage's.
func (b *builder) addMTP(w *Workload, blocks int) {
	a := b.a
	kinds := a.MTPLayerKinds(blocks)
	if len(kinds) == 0 {
		return
	}
	per := len(kinds) / blocks
	h := float64(a.Hidden)
	for i, k := range kinds {
		lt := LayerTrace{Index: a.Layers + i, Kind: k, MTP: true}
		b.layer(&lt)
		if i%per == 0 {
			pre := []Op{
				b.mem("mtp_embedding", ScopeOther, KindElementwise, 2*b.Ts*h*bf16),
				b.mem("mtp_enorm", ScopeOther, KindNorm, 2*b.Ts*h*bf16),
				b.mem("mtp_hnorm", ScopeOther, KindNorm, 2*b.Ts*h*bf16),
				b.gemm("mtp_eh_proj", ScopeOther, b.T, 2*h, h/float64(b.tp)),
			}
			lt.Fwd = append(pre, lt.Fwd...)
			lt.Bwd = append(lt.Bwd, reverseOps(pre)...)
			w.Head = append(w.Head, b.mtpHead()...)
		}
		w.Layers = append(w.Layers, lt)
		if i < per || !w.Layout.MTPUseRepeatedLayer {
			w.ParamsLocal += b.layerParams(k)
		}
	}
	w.ParamsLocal += b.mtpParams(blocks, w.Layout.PPSize() > 1)
}

// mtpHead is one block's final norm, output layer and loss, forward and
// backward, as the stage's own head.
func (b *builder) mtpHead() []Op {
	ops := b.head()
	for i := range ops {
		ops[i].Name = "mtp_" + ops[i].Name
	}
	return ops
}

// mtpParams is what the blocks hold beyond their layers: eh_proj and the
// three norms per block and, with embedding (a model chunk that is not the
// first's), the embedding the blocks look the shifted tokens up in
// (GPTModel builds it where mtp_process is set); the output layer is the
// loss chunk's own.
func (b *builder) mtpParams(blocks int, embedding bool) float64 {
	if blocks <= 0 {
		return 0
	}
	h := float64(b.a.Hidden)
	p := float64(blocks) * (2*h*h/float64(b.tp) + 3*h)
	if embedding {
		p += float64(b.a.Vocab) * h / float64(b.tp)
	}
	return p
}

// residualStreams is how many copies of the hidden state the layers pass
// on: DeepSeek-V4's hyper-connections widen the residual stream to
// num_residual_streams.
func residualStreams(a presets.Arch) float64 {
	if a.HyperConnections != nil && a.HyperConnections.NumResidualStreams > 1 {
		return float64(a.HyperConnections.NumResidualStreams)
	}
	return 1
}

// repeatedMTPParams is the parameters chunkKinds' layers of a chunk's
// MTP blocks count more than once when the blocks repeat one block's
// layers (mtp_use_repeated_layer): every block's but the first's, split as
// layerParamsSplit splits them.
func (b *builder) repeatedMTPParams(blocks int) (dense, expert float64) {
	if !b.l.MTPUseRepeatedLayer || blocks < 2 {
		return 0, 0
	}
	kinds := b.a.MTPLayerKinds(blocks)
	for _, k := range kinds[len(kinds)/blocks:] {
		d, e := b.layerParamsSplit(k)
		dense += d
		expert += e
	}
	return dense, expert
}
