package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
)

// errHelpShown is the error of a command group run without a subcommand:
// its help is already on stderr, so nothing more is printed.
var errHelpShown = errors.New("help shown")

// failLoudly makes every command under root fail loudly, with exit status 2
// and one line naming the problem: a group given an unknown subcommand
// (cobra prints a group's help and exits 0), a group given none (it prints
// its help to stderr), a missing or unexpected argument, and an unknown help
// topic. It adds cobra's help and completion commands first, so that they
// are covered too.
//
// A group is made runnable (cobra checks arguments only of a runnable
// command), so its help would offer "vigil db [flags]"; the group's use
// line drops the flags instead (the line then reads "vigil db", which
// prints this help). Not a custom usage template: text/template's
// reflection keeps every exported method of every linked type alive, and
// the binary grew by 3 MB for one line of help.
func failLoudly(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.Parent() == root && c.Name() == "help":
			checkHelpTopic(c)
		case c.HasSubCommands() && !c.Runnable():
			requireSubcommand(c)
		default:
			nameArgs(c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// requireSubcommand makes the group c reject an unknown subcommand, and
// print its help to stderr and exit 2 when given none, as the go command
// does.
func requireSubcommand(c *cobra.Command) {
	c.DisableFlagsInUseLine = true
	c.Args = unknownSubcommand
	c.RunE = func(c *cobra.Command, _ []string) error {
		writeHelp(c.ErrOrStderr(), c)
		return &exitError{code: 2, err: errHelpShown}
	}
}

// unknownSubcommand is the argument check of a group: cobra gives it the
// arguments that named no subcommand.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if s := suggestions(c, args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return usageError("%s", msg)
}

// suggestions returns, quoted, the subcommands of c close to the name typed.
func suggestions(c *cobra.Command, typed string) []string {
	if typed == "" || c.DisableSuggestions {
		return nil
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default
	}
	var quoted []string
	for _, s := range c.SuggestionsFor(typed) {
		quoted = append(quoted, fmt.Sprintf("%q", s))
	}
	return quoted
}

// writeHelp writes c's help, as cobra's default help template does, to w.
func writeHelp(w io.Writer, c *cobra.Command) {
	if about := strings.TrimRightFunc(cmp.Or(c.Long, c.Short), unicode.IsSpace); about != "" {
		fmt.Fprintf(w, "%s\n\n", about)
	}
	fmt.Fprint(w, c.UsageString())
}

// checkHelpTopic makes cobra's help command reject a topic that names no
// command, which it reports on stdout with exit status 0.
func checkHelpTopic(help *cobra.Command) {
	show := help.Run
	help.RunE = func(c *cobra.Command, args []string) error {
		found, rest, err := c.Root().Find(args)
		if err != nil || len(rest) > 0 && found.HasSubCommands() {
			return usageError("unknown help topic %q", strings.Join(args, " "))
		}
		show(c, args)
		return nil
	}
}

// nameArgs turns a failed argument check of c into a usage error naming
// the missing or unexpected argument, after the names in c's Use line.
func nameArgs(c *cobra.Command) {
	check := c.Args
	if check == nil {
		return
	}
	c.Args = func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return usageError("%s; usage: %s", argProblem(c.Use, args, err), c.UseLine())
		}
		return nil
	}
}

// argProblem describes what is wrong with args for the Use line use, given
// the error of the argument check.
func argProblem(use string, args []string, err error) string {
	required, optional, repeats := argNames(use)
	switch {
	case len(args) < len(required):
		return "missing argument " + required[len(args)]
	case !repeats && len(args) > len(required)+len(optional):
		return fmt.Sprintf("unexpected argument %q", args[len(required)+len(optional)])
	}
	return err.Error()
}

// argNames returns the names of the positional arguments in a Use line
// ("delete KEY [END]", "verify [ID...]"): the required ones, the optional
// ones, and whether the last one repeats.
func argNames(use string) (required, optional []string, repeats bool) {
	fields := strings.Fields(use)
	for _, f := range fields[min(1, len(fields)):] {
		if strings.HasPrefix(strings.TrimPrefix(f, "["), "-") {
			continue // a flag
		}
		name, more := strings.CutSuffix(strings.Trim(f, "[]"), "...")
		repeats = repeats || more
		if strings.HasPrefix(f, "[") {
			optional = append(optional, name)
		} else {
			required = append(required, name)
		}
	}
	return required, optional, repeats
}
