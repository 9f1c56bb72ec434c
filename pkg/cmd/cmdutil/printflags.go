package cmdutil

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
	printer      printers.ResourcePrinter // built by Complete
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

// Progress is where progress lines go: w for people, nowhere (nil) with
// -o, whose stderr a program reads for the one error line.
func (f *PrintFlags) Progress(w io.Writer) io.Writer {
	if f.Human() {
		return w
	}
	return nil
}

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

// Complete builds the printer for the chosen format (a template file is
// read here), or returns a usage error.
func (f *PrintFlags) Complete() error {
	if f.Human() {
		return nil
	}
	p, err := f.ToPrinter()
	f.printer = p
	return err
}

// Print renders v (any JSON-serialisable value, or JSON bytes) with the
// printer Complete built.
func (f *PrintFlags) Print(w io.Writer, v any) error {
	if f.printer == nil {
		if err := f.Complete(); err != nil {
			return err
		}
	}
	raw, ok := v.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
	}
	if err := f.printer.PrintObj(&runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}, w); err != nil {
		return exitcode.Usagef("cannot print the result with --output %q: %w", f.OutputFormat, err)
	}
	return nil
}
