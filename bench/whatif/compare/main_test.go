package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/engine/estimate"
	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// headless runs bench/whatif's search on the estimate engine and writes
// its result as cgtune --headless --json does.
func headless(t *testing.T, path string, whatIf bool, sets map[string]string) {
	t.Helper()
	file := filepath.Join("..", "qwen3-b200.yaml")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := presets.ParsePreset(file, raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.ResolveModel()
	if err != nil {
		t.Fatal(err)
	}
	rates, _ := stepmodel.SpecFor(p.Layout.GPU)
	cfg := search.Config{Model: m, Layout: p.Layout, MBridge: p.MBridge, Space: p.Space, Sets: sets, WhatIf: whatIf, Strategy: search.StrategyExhaustive,
		Engines: []engine.Engine{estimate.New(rates, stepmodel.DefaultHostCosts(), engine.DeviceInfo{Name: "est"})}}
	d, err := search.Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(result{DoneEvent: d, Model: m.Name, GPUType: p.Layout.GPU, MBridge: p.MBridge, Engine: "estimate", Sets: sets})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The bench's preset gives a drop-and-pad what-if row, and the table sets
// it next to the --set search's row of the same candidate: on the
// estimate engine both searches compute the same step, so the table says
// they agree (Δ +0.0%).
func TestCompareSetsTheWhatIfRowNextToTheSetSearch(t *testing.T) {
	dir := t.TempDir()
	headless(t, filepath.Join(dir, "whatif.json"), true, nil)
	headless(t, filepath.Join(dir, "set.json"), false, map[string]string{
		"model.moe_expert_capacity_factor": "1.0", "model.moe_pad_expert_input_to_capacity": "true"})
	w, err := load(filepath.Join(dir, "whatif.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := load(filepath.Join(dir, "set.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	render(&b, w, s)
	out := b.String()
	row := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| full_iteration w1 | drop-and-pad | estimated |") {
			row = l
		}
	}
	if row == "" {
		t.Fatalf("no drop-and-pad row of full_iteration w1:\n%s", out)
	}
	cells := strings.Split(row, " | ")
	if cells[5] != "+0.0%" || cells[8] != "+0.0%" || cells[3] != cells[4] || cells[6] != cells[7] {
		t.Errorf("the two searches' step and eager do not agree: %q", row)
	}
	if !strings.Contains(out, "--set model.moe_expert_capacity_factor=1.0 --set model.moe_pad_expert_input_to_capacity=true") ||
		!strings.Contains(out, "- drop-and-pad (estimated): modelled") {
		t.Errorf("the table lacks the --set flags or the pricing:\n%s", out)
	}
}
