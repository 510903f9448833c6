package presets

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Pipeline layout strings are MCore's pipeline_model_parallel_layout
// syntax (MLM megatron/core/transformer/pipeline_parallel_layer_layout.py,
// PipelineParallelLayerLayout.parse_str_to_list): stages separated by |,
// one character per layer (E embedding, t decoder layer, m MTP layer, L
// loss), (…)*n and x*n repeat, commas are cosmetic. "Et*4|t*4|t*3L" is
// three stages.
const pipelineLayoutChars = "EtmL"

var (
	layoutGroupRe  = regexp.MustCompile(`\(([^)]+)\)\*(\d+)`)
	layoutRepeatRe = regexp.MustCompile(`(.)\*(\d+)`)
)

// maxLayoutChars bounds an expanded layout: far more than MaxLayers
// decoder and MTP layers with a separator between each.
const maxLayoutChars = 8 * MaxLayers

// PipelineStages expands a pipeline layout string into its stages, in
// layer-id order (virtual stages of rank 0, 1, ... then the next virtual
// stage), each a string of E, t, m, L.
func PipelineStages(layout string) ([]string, error) {
	s := strings.ReplaceAll(layout, ",", "")
	for _, re := range []*regexp.Regexp{layoutGroupRe, layoutRepeatRe} {
		var bad error
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatch(m)
			n, err := strconv.Atoi(sub[2])
			if err != nil || n < 0 || len(sub[1])*n > maxLayoutChars {
				bad = fmt.Errorf("repeat %q is too long (the expanded layout may hold %d characters)", m, maxLayoutChars)
				return ""
			}
			return strings.Repeat(sub[1], n)
		})
		if bad != nil {
			return nil, bad
		}
		if len(s) > maxLayoutChars {
			return nil, fmt.Errorf("the expanded layout is longer than %d characters", maxLayoutChars)
		}
	}
	stages := strings.Split(s, "|")
	for i, st := range stages {
		for _, r := range st {
			if !strings.ContainsRune(pipelineLayoutChars, r) {
				return nil, fmt.Errorf("stage %d: character %q (allowed: E embedding, t decoder layer, m MTP layer, L loss, | between stages, (…)*n and x*n to repeat)", i+1, r)
			}
		}
	}
	return stages, nil
}

// checkPipelineLayout applies MCore's checks of a layout to l and the
// model's layer count (PipelineParallelLayerLayout.__init__ and
// validate_layer_layout): whole virtual stages per rank, the embedding
// first and the loss last, exactly once each, every decoder and MTP layer
// once.
func checkPipelineLayout(l *Layout, layers int) error {
	stages, err := PipelineStages(l.PipelineLayout)
	if err != nil {
		return err
	}
	pp := l.PPSize()
	if len(stages)%pp != 0 {
		return fmt.Errorf("%d stages is not a multiple of pp (%d)", len(stages), pp)
	}
	if vp := len(stages) / pp; l.VP > 1 && vp != l.VP || l.VP <= 1 && vp > 1 {
		return fmt.Errorf("%d stages over pp %d is a virtual pipeline of %d but vp is %d", len(stages), pp, vp, l.VPSize())
	}
	all := strings.Join(stages, "")
	switch {
	case !strings.HasPrefix(all, "E") || strings.Count(all, "E") != 1:
		return fmt.Errorf("the embedding (E) must come first, once")
	case !strings.HasSuffix(all, "L") || strings.Count(all, "L") != 1:
		return fmt.Errorf("the loss (L) must come last, once")
	case strings.Count(all, "t") != layers:
		return fmt.Errorf("%d decoder layers (t) but the model has %d", strings.Count(all, "t"), layers)
	case strings.Count(all, "m") != l.MTPLayers:
		return fmt.Errorf("%d MTP layers (m) but mtp_layers is %d", strings.Count(all, "m"), l.MTPLayers)
	}
	return nil
}
