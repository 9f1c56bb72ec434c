package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// PrintFlags are kubectl's -o/--output and --template flags. An empty format
// means the command's own human-readable output; every other format goes
// through cli-runtime's printers (json, yaml, jsonpath, go-template and their
// -file forms) applied to the command's JSON result.
type PrintFlags struct {
	OutputFormat string
	jsonYaml     *genericclioptions.JSONYamlPrintFlags
	template     *genericclioptions.KubeTemplatePrintFlags
}

// NewPrintFlags returns print flags with the human format as default.
func NewPrintFlags() *PrintFlags {
	return &PrintFlags{
		jsonYaml: genericclioptions.NewJSONYamlPrintFlags(),
		template: genericclioptions.NewKubeTemplatePrintFlags(),
	}
}

// AddFlags binds -o, --template and --allow-missing-template-keys.
func (f *PrintFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.OutputFormat, "output", "o", f.OutputFormat,
		"Output format. One of: ("+strings.Join(f.allowedFormats(), ", ")+"). Default: human-readable text")
	f.template.AddFlags(cmd)
}

func (f *PrintFlags) allowedFormats() []string {
	return append(f.jsonYaml.AllowedFormats(), f.template.AllowedFormats()...)
}

// Human reports whether the command should print its own text output.
func (f *PrintFlags) Human() bool { return f.OutputFormat == "" }

// ToPrinter returns the printer for the chosen format, or a usage error.
func (f *PrintFlags) ToPrinter() (printers.ResourcePrinter, error) {
	format := f.OutputFormat
	if p, err := f.jsonYaml.ToPrinter(format); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	p, err := f.template.ToPrinter(format)
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, exitcode.Usagef("--output must be one of %s, not %q",
			strings.Join(f.allowedFormats(), ", "), format)
	}
	if err != nil {
		return nil, exitcode.Usagef("bad --output %q: %w", format, err)
	}
	return p, nil
}

// Validate checks the format without printing anything.
func (f *PrintFlags) Validate() error {
	if f.Human() {
		return nil
	}
	_, err := f.ToPrinter()
	return err
}

// Print renders v (any JSON-serialisable value) with the chosen printer.
func (f *PrintFlags) Print(w io.Writer, v any) error {
	p, err := f.ToPrinter()
	if err != nil {
		return err
	}
	raw, ok := v.([]byte)
	if !ok {
		if raw, err = json.Marshal(v); err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
	}
	if err := p.PrintObj(&runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}, w); err != nil {
		return exitcode.Usagef("cannot print the result with --output %q: %w", f.OutputFormat, err)
	}
	return nil
}
