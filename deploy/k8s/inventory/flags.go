package inventory

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
)

// Flag is one flag of a binary as its --help lists it.
type Flag struct {
	Name    string // without dashes: max-age
	Env     string // CHATGUARD_MAX_AGE
	Default string // as printed: 6h0m0s, "" for empty
}

// helpRow matches a flag row of cmd/internal/cli's usage text:
// "  --max-age  CHATGUARD_MAX_AGE  default 6h0m0s  usage".
var helpRow = regexp.MustCompile(`(?m)^\s+--([a-z0-9-]+)\s+(CHATGUARD_[A-Z0-9_]+)\s+default (\S+)`)

// ParseHelp returns the flags listed in a --help text, by environment
// variable. It fails when the text lists none (the format changed).
func ParseHelp(help string) (map[string]Flag, error) {
	out := map[string]Flag{}
	for _, m := range helpRow.FindAllStringSubmatch(help, -1) {
		def := m[3]
		if def == `""` {
			def = ""
		}
		out[m[2]] = Flag{Name: m[1], Env: m[2], Default: def}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("inventory: no flag rows in the help text (did its format change?):\n%s", help)
	}
	return out, nil
}

// Help runs `bin args... --help` and parses its flags. --help must exit 0.
func Help(ctx context.Context, bin string, args ...string) (map[string]Flag, error) {
	out, err := exec.CommandContext(ctx, bin, append(args, "--help")...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("inventory: %s %s --help: %w\n%s", bin, strings.Join(args, " "), err, out)
	}
	return ParseHelp(string(out))
}
