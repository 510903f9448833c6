package presets

import (
	"fmt"
	"strconv"
	"strings"
)

// PipelineChunk is one virtual pipeline stage of a pipeline layout: what
// one model chunk of one pipeline rank builds.
type PipelineChunk struct {
	Embedding bool `json:"embedding,omitempty"`
	Decoder   int  `json:"decoder"` // decoder (transformer) layers
	MTP       int  `json:"mtp,omitempty"`
	Loss      bool `json:"loss,omitempty"`
}

// maxLayoutStages bounds the stages a pipeline layout may unroll to
// (PP × VP of the largest layout MCore can build here).
const maxLayoutStages = MaxDegree

// ParsePipelineLayout reads MCore's pipeline_model_parallel_layout string
// into its virtual stages in layer order (stage g is virtual stage g/PP of
// pipeline rank g%PP), as PipelineParallelLayerLayout.parse_str_to_list
// does (megatron/core/transformer/pipeline_parallel_layer_layout.py):
// commas are cosmetic, "(…)*n" and "x*n" repeat, "|" separates stages, E
// is the embedding, t a decoder layer, m an MTP layer, L the loss.
func ParsePipelineLayout(s string) ([]PipelineChunk, error) {
	flat, err := unrollLayout(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		return nil, err
	}
	var out []PipelineChunk
	for _, stage := range strings.Split(flat, "|") {
		var c PipelineChunk
		for _, r := range stage {
			switch r {
			case 'E':
				c.Embedding = true
			case 't':
				c.Decoder++
			case 'm':
				c.MTP++
			case 'L':
				c.Loss = true
			default:
				return nil, fmt.Errorf("unknown layer character %q (allowed: E embedding, t decoder, m mtp, L loss, | between stages, (…)*n and x*n to repeat)", r)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// unrollLayout expands "(…)*n" (innermost first) and then "x*n".
func unrollLayout(s string) (string, error) {
	for {
		close := strings.IndexByte(s, ')')
		if close < 0 {
			break
		}
		open := strings.LastIndexByte(s[:close], '(')
		if open < 0 {
			return "", fmt.Errorf("unbalanced parentheses")
		}
		n, width, err := repeatCount(s[close+1:])
		if err != nil {
			return "", err
		}
		body := s[open+1 : close]
		if len(body)*n > 1<<20 {
			return "", fmt.Errorf("the layout unrolls to more than %d characters", 1<<20)
		}
		s = s[:open] + strings.Repeat(body, n) + s[close+1+width:]
	}
	if strings.IndexByte(s, '(') >= 0 {
		return "", fmt.Errorf("unbalanced parentheses")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if i+1 < len(s) && s[i+1] == '*' {
			n, width, err := repeatCount(s[i+1:])
			if err != nil {
				return "", err
			}
			if b.Len()+n > 1<<20 {
				return "", fmt.Errorf("the layout unrolls to more than %d characters", 1<<20)
			}
			b.WriteString(strings.Repeat(s[i:i+1], n))
			i += width
			continue
		}
		if s[i] == '*' {
			return "", fmt.Errorf("\"*\" must follow a layer character or a parenthesis")
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

// repeatCount reads "*n" at the start of s: n, and the characters read.
func repeatCount(s string) (n, width int, err error) {
	if !strings.HasPrefix(s, "*") {
		return 0, 0, fmt.Errorf("\")\" must be followed by *n")
	}
	i := 1
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err = strconv.Atoi(s[1:i])
	if err != nil || n < 0 || n > maxLayoutStages {
		return 0, 0, fmt.Errorf("bad repeat count %q (allowed: 0 to %d)", s[:i], maxLayoutStages)
	}
	return n, i, nil
}

// CheckPipelineLayout checks a layout's pipeline_layout against the model
// and the layout's degrees as MCore's validate_layer_layout and
// TransformerConfig do: PP × VP stages, the embedding first and the loss
// last exactly once, every decoder layer and MTP layer placed once.
func CheckPipelineLayout(chunks []PipelineChunk, layers int, l Layout) error {
	pp, vp := l.PPSize(), l.VPSize()
	if len(chunks) != pp*vp {
		return fmt.Errorf("%d stages, but pp × vp = %d × %d = %d", len(chunks), pp, vp, pp*vp)
	}
	var emb, loss, dec, mtp int
	for _, c := range chunks {
		emb += b2i(c.Embedding)
		loss += b2i(c.Loss)
		dec += c.Decoder
		mtp += c.MTP
	}
	switch {
	case emb != 1 || !chunks[0].Embedding:
		return fmt.Errorf("the embedding (E) must be the first layer, once")
	case loss != 1 || !chunks[len(chunks)-1].Loss:
		return fmt.Errorf("the loss (L) must be the last layer, once")
	case dec != layers:
		return fmt.Errorf("%d decoder layers (t), the model has %d", dec, layers)
	case mtp != l.MTPLayers:
		return fmt.Errorf("%d MTP layers (m), mtp_layers is %d", mtp, l.MTPLayers)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
