package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"cgtune/recipe"
)

func newRulesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rules [ID]",
		Short: "List the validation rules cgtune applies, or explain one",
		Long: `rules lists every rule cgtune check, the search and the TUI apply, in the
order a job's start-up meets them: its ID, what it checks, the Megatron-Bridge
releases that have it, whether it rejects a configuration or changes it, and
the source file and function it was read from (MB: Megatron-Bridge, MLM:
Megatron-LM and its Megatron-Core).

rules ID explains one rule: when it fires, the exact message the stack prints
({...} stands for a value), the recipe fields it reads and what to change.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if len(args) == 0 {
				printRules(out)
				return nil
			}
			r, ok := recipe.LookupRule(strings.ToUpper(strings.TrimSpace(args[0])))
			if !ok {
				return fail(exitBadInput, "unknown rule %q (allowed: %s)", args[0], recipe.RuleIDs())
			}
			explainRule(out, r)
			return nil
		},
	}
}

// sourcePrefixes are the folders a table cell leaves out of a source path.
var sourcePrefixes = strings.NewReplacer("MB src/megatron/bridge/", "MB ", "MLM megatron/core/", "MLM core/")

func printRules(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCHECKS\tMB\tLAUNCHER\tKIND\tSOURCE")
	for _, r := range recipe.Rules() {
		launcher := "any"
		if r.Launcher != "" {
			launcher = string(r.Launcher)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Summary, r.Releases(), launcher, r.Kind, sourcePrefixes.Replace(r.Source))
	}
	tw.Flush()
}

func explainRule(w io.Writer, r recipe.Rule) {
	fmt.Fprintf(w, "%s: %s\n", r.ID, r.Summary)
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(w, "  %-9s %s\n", name+":", wrap(value, 88, strings.Repeat(" ", 12)))
		}
	}
	field("kind", r.Kind.String())
	field("releases", "Megatron-Bridge "+r.Releases()+" ("+genNames(r)+"), jobs started by "+r.Launchers())
	field("source", r.Source)
	field("when", r.Condition)
	switch len(r.Messages) {
	case 0:
	case 1:
		field("message", r.Messages[0])
	default:
		fmt.Fprintln(w, "  messages: (the first that applies)")
		for _, m := range r.Messages {
			fmt.Fprintf(w, "    %s\n", m) // whole: it is compared byte for byte
		}
	}
	field("reads", strings.Join(r.Fields, ", "))
	field("fix", r.Fix)
	for _, ch := range r.Enabling {
		// The change a what-if row prices (cgtune --what-if).
		field("lifted", fmt.Sprintf("by %s: %s (%s); cost: %s", ch.Name, ch.Summary, ch.SetsText(nil), ch.Cost))
	}
}

// wrap breaks text into lines of at most width characters at spaces
// (a longer word stays whole), the lines after the first indented.
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Split(text, " ") {
		switch {
		case i == 0:
		case line+1+len(word) > width && line > 0:
			b.WriteString("\n" + indent)
			line = 0
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}

func genNames(r recipe.Rule) string {
	var out []string
	for _, g := range r.Gens {
		out = append(out, g.String())
	}
	return strings.Join(out, ", ")
}
