package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/proxbus/proxbus/handlers"
)

// cliCommand is one subcommand as shell completion knows it.
type cliCommand struct {
	name string
	help string
	// subs are its sub-subcommands (dlq list|show|replay, sim pve|netbox, …), if any.
	subs []string
}

// flagValues are the values completed after a flag that takes one of a fixed set.
var flagValues = map[string][]string{
	"output":     {"text", "json"},
	"log-format": {"auto", "json", "text"},
	"log-level":  {"debug", "info", "warn", "error"},
	"scenario":   {"demo"},
}

// isFileFlag reports whether a flag's value is a file path (completed as one).
func isFileFlag(name string) bool {
	for _, suffix := range []string{"-file", "-ca", "-cert", "-tls-key", "-creds", "-nkey"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// cliFlag is one flag of a subcommand: its name, whether it takes a value, and its help.
type cliFlag struct {
	name       string
	takesValue bool
	help       string
}

// nodeFlags are the flags of a kong command node and its parents, but -h.
func nodeFlags(n *kong.Node) []cliFlag {
	var out []cliFlag
	for _, group := range n.AllFlags(true) {
		for _, f := range group {
			if f.Name == "help" {
				continue
			}
			help, _, _ := strings.Cut(f.Help, " ($PROXBUS_")
			out = append(out, cliFlag{name: f.Name, takesValue: !f.IsBool(), help: strings.TrimSuffix(help, ".")})
		}
	}
	return out
}

// completionModel is what every completion script is generated from.
type completionModel struct {
	commands []cliCommand
	verbs    []string
	// flags maps "cmd" or "cmd sub" to that command's flags.
	flags map[string][]cliFlag
}

// newCompletionModel reads the subcommands, their flags and send's verbs from the command
// line's own grammar (the kong model), so completion can never drift from the parser.
func newCompletionModel() completionModel {
	m := completionModel{verbs: handlers.NewRegistry(handlers.Builtin()...).Names(), flags: map[string][]cliFlag{}}
	sort.Strings(m.verbs)
	var c cli
	parser, err := newParser(&c, newCLIEnv(context.Background(), nil, io.Discard, io.Discard))
	if err != nil {
		return m
	}
	for _, n := range parser.Model.Children {
		if n.Hidden {
			continue
		}
		cmd := cliCommand{name: n.Name, help: strings.TrimSuffix(n.Help, ".")}
		if len(n.Children) == 0 {
			m.flags[n.Name] = nodeFlags(n)
		}
		for _, sub := range n.Children {
			cmd.subs = append(cmd.subs, sub.Name)
			m.flags[n.Name+" "+sub.Name] = nodeFlags(sub)
		}
		m.commands = append(m.commands, cmd)
	}
	if slices.ContainsFunc(m.commands, func(c cliCommand) bool { return c.name == "completion" }) {
		for _, shell := range []string{"bash", "zsh", "fish"} {
			m.flags["completion "+shell] = nil
		}
		for i := range m.commands {
			if m.commands[i].name == "completion" {
				m.commands[i].subs = []string{"bash", "zsh", "fish"}
			}
		}
	}
	return m
}

func (m completionModel) commandNames() []string {
	names := make([]string, len(m.commands))
	for i, c := range m.commands {
		names[i] = c.name
	}
	return names
}

// flagWords renders flags as --name words.
func flagWords(flags []cliFlag) string {
	words := make([]string, len(flags))
	for i, f := range flags {
		words[i] = "--" + f.name
	}
	return strings.Join(words, " ")
}

// valueFlags groups every value-taking flag of the model: fixed choices, files, free values.
func (m completionModel) valueFlags() (choices map[string][]string, files, free []string) {
	choices = map[string][]string{}
	seen := map[string]bool{}
	for _, key := range sortedKeys(m.flags) {
		for _, f := range m.flags[key] {
			if !f.takesValue || seen[f.name] {
				continue
			}
			seen[f.name] = true
			switch {
			case flagValues[f.name] != nil:
				choices[f.name] = flagValues[f.name]
			case isFileFlag(f.name):
				files = append(files, f.name)
			default:
				free = append(free, f.name)
			}
		}
	}
	return choices, files, free
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// dashed renders flag names as a shell case pattern: --a|-a|--b|-b.
func dashed(names []string) string {
	var alts []string
	for _, n := range names {
		alts = append(alts, "--"+n, "-"+n)
	}
	return strings.Join(alts, "|")
}

// completionCmd is `proxbus completion bash|zsh|fish`: it prints the completion script
// for one shell, generated from the command line's grammar.
type completionCmd struct {
	Shell string `arg:"" optional:"" help:"bash, zsh or fish."`
}

// Run prints the script.
func (c *completionCmd) Run(e *cliEnv) error {
	var script string
	switch c.Shell {
	case "bash":
		script = bashShell.script(newCompletionModel())
	case "zsh":
		script = zshShell.script(newCompletionModel())
	case "fish":
		script = fishCompletion(newCompletionModel())
	case "":
		return fmt.Errorf("%w: proxbus completion bash|zsh|fish: name the shell", errUsage)
	default:
		return fmt.Errorf("%w: proxbus completion bash|zsh|fish (got %q)", errUsage, c.Shell)
	}
	_, err := io.WriteString(e.stdout, script)
	return err
}

// caseShell is what differs between the bash and zsh scripts, which share one shape: the
// subcommand at the first word, a flag's value by the word before it, then the words of the
// subcommand (send's verbs, or the sub-subcommands and then their flags).
type caseShell struct {
	head, tail string
	// firstWord, sendVerb and subWord are the conditions of the subcommand's position, of
	// send's verb and of a sub-subcommand.
	firstWord, sendVerb, subWord string
	// offer is the statement that offers words; files offers file paths; ret ends early.
	offer      func(words string) string
	files, ret string
	prev, cmd  string // the shell's expressions of the previous word and of the subcommand
	sub        string // the shell's expression of the sub-subcommand
}

var bashShell = caseShell{
	head: `# bash completion for proxbus; generated by "proxbus completion bash".
# Load it with: source <(proxbus completion bash)
_proxbus() {
    local cur prev cmd sub
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    cmd="${COMP_WORDS[1]}"
    sub="${COMP_WORDS[2]}"
    COMPREPLY=()
`,
	tail: `    return 0
}
complete -F _proxbus proxbus
`,
	firstWord: `[[ ${COMP_CWORD} -eq 1 ]]`,
	sendVerb:  `[[ ${COMP_CWORD} -eq 2 && "$cur" != -* ]]`,
	subWord:   `[[ ${COMP_CWORD} -eq 2 ]]`,
	offer:     func(words string) string { return fmt.Sprintf(`COMPREPLY=($(compgen -W %q -- "$cur"))`, words) },
	files:     `COMPREPLY=($(compgen -f -- "$cur"))`,
	ret:       "return 0",
	prev:      `"$prev"`, cmd: `"$cmd"`, sub: `"$sub"`,
}

var zshShell = caseShell{
	head: `#compdef proxbus
# zsh completion for proxbus; generated by "proxbus completion zsh".
# Save it as _proxbus in a directory of $fpath, or: source <(proxbus completion zsh)
_proxbus() {
    local cmd=${words[2]} sub=${words[3]} cur=${words[CURRENT]} prev=${words[CURRENT-1]}
`,
	tail: `}
if [ "$funcstack[1]" = "_proxbus" ]; then
    _proxbus "$@"
else
    compdef _proxbus proxbus
fi
`,
	firstWord: `(( CURRENT == 2 ))`,
	sendVerb:  `(( CURRENT == 3 )) && [[ $cur != -* ]]`,
	subWord:   `(( CURRENT == 3 ))`,
	offer:     func(words string) string { return "compadd -- " + words },
	files:     "_files",
	ret:       "return",
	prev:      "$prev", cmd: "$cmd", sub: "$sub",
}

// script is sh's completion script for m.
func (sh caseShell) script(m completionModel) string {
	var b strings.Builder
	b.WriteString(sh.head)
	fmt.Fprintf(&b, "    if %s; then\n        %s\n        %s\n    fi\n", sh.firstWord, sh.offer(strings.Join(m.commandNames(), " ")), sh.ret)
	choices, files, free := m.valueFlags()
	fmt.Fprintf(&b, "    case %s in\n", sh.prev)
	for _, name := range sortedKeys(choices) {
		fmt.Fprintf(&b, "        %s) %s; %s ;;\n", dashed([]string{name}), sh.offer(strings.Join(choices[name], " ")), sh.ret)
	}
	if len(files) > 0 {
		fmt.Fprintf(&b, "        %s) %s; %s ;;\n", dashed(files), sh.files, sh.ret)
	}
	if len(free) > 0 {
		fmt.Fprintf(&b, "        %s) %s ;;\n", dashed(free), sh.ret)
	}
	fmt.Fprintf(&b, "    esac\n    case %s in\n", sh.cmd)
	for _, c := range m.commands {
		switch {
		case c.name == "help":
			continue
		case c.name == "send":
			fmt.Fprintf(&b, "        send)\n            if %s; then\n                %s\n            else\n                %s\n            fi ;;\n",
				sh.sendVerb, sh.offer(strings.Join(m.verbs, " ")), sh.offer(flagWords(m.flags["send"])))
		case len(c.subs) == 0:
			fmt.Fprintf(&b, "        %s) %s ;;\n", c.name, sh.offer(flagWords(m.flags[c.name])))
		default:
			fmt.Fprintf(&b, "        %s)\n            if %s; then\n                %s\n            else\n                case %s in\n", c.name, sh.subWord, sh.offer(strings.Join(c.subs, " ")), sh.sub)
			for _, s := range c.subs {
				fmt.Fprintf(&b, "                    %s) %s ;;\n", s, sh.offer(flagWords(m.flags[c.name+" "+s])))
			}
			b.WriteString("                esac\n            fi ;;\n")
		}
	}
	b.WriteString("    esac\n")
	b.WriteString(sh.tail)
	return b.String()
}

// fishQuote quotes s for fish (single quotes; backslash and quote escaped).
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// fishCompletion is the fish script: `proxbus completion fish > ~/.config/fish/completions/proxbus.fish`.
func fishCompletion(m completionModel) string {
	var b strings.Builder
	b.WriteString(`# fish completion for proxbus; generated by "proxbus completion fish".
# Save it as ~/.config/fish/completions/proxbus.fish
complete -c proxbus -f
`)
	for _, c := range m.commands {
		fmt.Fprintf(&b, "complete -c proxbus -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.help))
	}
	fmt.Fprintf(&b, "complete -c proxbus -n %s -a %s\n", fishQuote("__fish_seen_subcommand_from send; and test (count (commandline -opc)) -eq 2"), fishQuote(strings.Join(m.verbs, " ")))
	writeFlags := func(cond string, flags []cliFlag) {
		for _, f := range flags {
			fmt.Fprintf(&b, "complete -c proxbus -n %s -l %s", fishQuote(cond), f.name)
			switch {
			case flagValues[f.name] != nil && f.takesValue:
				fmt.Fprintf(&b, " -x -a %s", fishQuote(strings.Join(flagValues[f.name], " ")))
			case isFileFlag(f.name) && f.takesValue:
				b.WriteString(" -r -F")
			case f.takesValue:
				b.WriteString(" -x")
			}
			if f.help != "" {
				fmt.Fprintf(&b, " -d %s", fishQuote(f.help))
			}
			b.WriteString("\n")
		}
	}
	for _, c := range m.commands {
		switch {
		case c.name == "help":
		case len(c.subs) == 0:
			writeFlags("__fish_seen_subcommand_from "+c.name, m.flags[c.name])
		default:
			subs := strings.Join(c.subs, " ")
			fmt.Fprintf(&b, "complete -c proxbus -n %s -a %s\n", fishQuote("__fish_seen_subcommand_from "+c.name+"; and not __fish_seen_subcommand_from "+subs), fishQuote(subs))
			for _, s := range c.subs {
				writeFlags("__fish_seen_subcommand_from "+c.name+"; and __fish_seen_subcommand_from "+s, m.flags[c.name+" "+s])
			}
		}
	}
	return b.String()
}
