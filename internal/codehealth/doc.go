// Package codehealth holds no code: its tests keep the module's house
// rules for every package at once, by reading the Go sources (go/ast,
// go/types) and the other source files:
//
//   - every docs/... path cited in code exists in the repository;
//   - no code comment (Go, or a Python # comment) carries a figure
//     measured on a run (the figure belongs in the docs/ document the
//     comment cites);
//   - no test comment tells a history ("Before: ...") instead of what the
//     test asserts;
//   - no function outside tests is longer than 80 lines;
//   - an error formatted into another error is wrapped with %w, so that
//     errors.Is and errors.As see through it.
//
// Each rule's exceptions are named, file by file, with why.
package codehealth
