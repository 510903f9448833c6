// Package search finds the best CUDA-graph candidate of a recipe: the
// configuration space (Plan: every candidate of a space, judged by the
// recipe's rules and the capture plan), the strategies that pick what to
// measure, the runner that measures candidates on the engines (Run), the
// ranking of their results, and the journal a search can resume from.
package search
