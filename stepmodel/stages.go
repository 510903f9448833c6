package stepmodel

import (
	"fmt"
	"strconv"
	"strings"

	"cgtune/presets"
)

// Chunk is one model chunk of a pipeline rank (one virtual stage): the
// decoder layers it builds, as indices into the model's layers in order,
// and what else it holds.
type Chunk struct {
	Layers    []int
	Embedding bool
	Loss      bool
	MTP       int
}

// PipelineSplit is how the job's layers sit on the pipeline ranks, as
// Megatron-Core builds them: Ranks[r][v] is virtual stage v of pipeline
// rank r. Note says how it was split when Megatron-Core would refuse the
// layout's split ("" otherwise).
type PipelineSplit struct {
	Ranks [][]Chunk
	Note  string
}

// SplitPipeline places the model's layers on the layout's pipeline ranks:
//
//   - with a pipeline_model_parallel_layout, as the layout says
//     (PipelineParallelLayerLayout: virtual stage g is virtual stage g/PP of
//     rank g%PP, layers numbered in g order);
//   - else evenly over PP × VP chunks, the embedding and the loss counted
//     as a layer each when the recipe accounts for them, the first chunk
//     (the last) then building one decoder layer fewer
//     (get_num_layers_to_build, megatron/core/transformer/transformer_block.py),
//     layers numbered in chunk order (get_transformer_layer_offset);
//   - where that split is not whole (Megatron-Core asserts), as evenly as
//     it can, saying so in Note.
//
// The MTP layers sit with the loss unless the layout places them.
func SplitPipeline(a presets.Arch, l presets.Layout) (PipelineSplit, error) {
	n := len(a.LayerKinds())
	pp, vp := l.PPSize(), l.VPSize()
	var counts []presets.PipelineChunk
	var note string
	if l.PipelineLayout != "" {
		chunks, err := presets.ParsePipelineLayout(l.PipelineLayout)
		if err == nil {
			err = presets.CheckPipelineLayout(chunks, n, l)
		}
		if err != nil {
			return PipelineSplit{}, fmt.Errorf("pipeline_layout %q: %w", l.PipelineLayout, err)
		}
		counts = chunks
	} else {
		var err error
		if counts, note, err = evenSplit(n, pp, vp, l); err != nil {
			return PipelineSplit{}, err
		}
	}
	s := PipelineSplit{Ranks: make([][]Chunk, pp), Note: note}
	for r := range s.Ranks {
		s.Ranks[r] = make([]Chunk, vp)
	}
	next := 0
	for g, c := range counts {
		ch := Chunk{Embedding: c.Embedding, Loss: c.Loss, MTP: c.MTP}
		for range c.Decoder {
			ch.Layers = append(ch.Layers, next)
			next++
		}
		s.Ranks[g%pp][g/pp] = ch
	}
	return s, nil
}

// evenSplit is the chunks of Megatron-Core's even split in layer order.
func evenSplit(n, pp, vp int, l presets.Layout) ([]presets.PipelineChunk, string, error) {
	chunks := pp * vp
	if n < pp {
		return nil, "", fmt.Errorf("%d layers cannot be split over PP=%d", n, pp)
	}
	total := n + b2i(l.AccountForEmbedding) + b2i(l.AccountForLoss)
	out := make([]presets.PipelineChunk, chunks)
	note := ""
	if total%pp == 0 && (total/pp)%vp == 0 {
		per := total / chunks
		for g := range out {
			out[g].Decoder = per
		}
		if l.AccountForEmbedding {
			out[0].Decoder--
		}
		if l.AccountForLoss {
			out[chunks-1].Decoder--
		}
		if out[0].Decoder < 0 || out[chunks-1].Decoder < 0 {
			return nil, "", fmt.Errorf("not enough layers in the first or last virtual pipeline stage (%d layers over pp × vp = %d)", n, chunks)
		}
	} else {
		// Megatron-Core asserts here; split as evenly as possible, the
		// first chunks taking the extra layers, so a layout that cannot
		// run still gets a figure.
		per := (n + chunks - 1) / chunks
		left := n
		for g := range out {
			out[g].Decoder = min(per, left)
			left -= out[g].Decoder
		}
		note = fmt.Sprintf("%d layers (with the embedding and loss the recipe counts: %d) do not split evenly over pp %d × vp %d, which Megatron-Core refuses; split as evenly as possible", n, total, pp, vp)
	}
	out[0].Embedding = true
	out[chunks-1].Loss = true
	out[chunks-1].MTP = l.MTPLayers
	return out, note, nil
}

// RankLayers lists the decoder layers of pipeline rank r, in the order
// its chunks hold them.
func (s PipelineSplit) RankLayers(r int) []int {
	var out []int
	for _, c := range s.Ranks[r] {
		out = append(out, c.Layers...)
	}
	return out
}

// MTP is the MTP layers pipeline rank r builds.
func (s PipelineSplit) MTP(r int) int {
	n := 0
	for _, c := range s.Ranks[r] {
		n += c.MTP
	}
	return n
}

// describeLayers writes layer indices as ranges: "0-6, 16-22".
func describeLayers(idx []int) string {
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
