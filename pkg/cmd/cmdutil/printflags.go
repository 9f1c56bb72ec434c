package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// PrintFlags are kubectl's -o/--output and --template flags. An empty format
// means the command's own human-readable output; every other format goes
// through cli-runtime's printers (json, yaml, kyaml, jsonpath, go-template
// and their -file forms) applied to the command's JSON result, chosen as
// kubectl's print flags choose them. (Those flags live in cli-runtime's
// genericclioptions, whose package links all of kustomize; the choice is
// made here, on cli-runtime's printers.)
type PrintFlags struct {
	OutputFormat     string
	Template         string
	AllowMissingKeys bool
	printer          printers.ResourcePrinter // built by Complete
}

// The formats, in kubectl's order, and those that take a template.
var (
	plainFormats    = []string{"json", "yaml", "kyaml"}
	templateFormats = []string{"go-template", "go-template-file", "template", "templatefile"}
	jsonPathFormats = []string{"jsonpath", "jsonpath-as-json", "jsonpath-file"}
)

// NewPrintFlags returns print flags with the human format as default.
func NewPrintFlags() *PrintFlags {
	return &PrintFlags{AllowMissingKeys: true}
}

// AddFlags binds -o, --template and --allow-missing-template-keys.
func (f *PrintFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.OutputFormat, "output", "o", f.OutputFormat,
		"Output format. One of: ("+strings.Join(f.allowedFormats(), ", ")+"). Default: human-readable text")
	cmd.Flags().StringVar(&f.Template, "template", f.Template, "Template string or path to template file to use when -o=go-template, -o=go-template-file. The template format is golang templates [http://golang.org/pkg/text/template/#pkg-overview].")
	_ = cmd.MarkFlagFilename("template")
	cmd.Flags().BoolVar(&f.AllowMissingKeys, "allow-missing-template-keys", f.AllowMissingKeys, "If true, ignore any errors in templates when a field or map key is missing in the template. Only applies to golang and jsonpath output formats.")
}

func (f *PrintFlags) allowedFormats() []string {
	return slices.Concat(plainFormats, templateFormats, jsonPathFormats)
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
// A template is given with --template or after the format
// (-o jsonpath='{.x}'); a -file format names a file of at most 2 MiB.
func (f *PrintFlags) ToPrinter() (printers.ResourcePrinter, error) {
	format, value := strings.ToLower(f.OutputFormat), f.Template
	if name, inline, ok := strings.Cut(f.OutputFormat, "="); ok && value == "" &&
		(slices.Contains(templateFormats, name) || slices.Contains(jsonPathFormats, name)) {
		format, value = name, inline
	}
	switch {
	case format == "json":
		return &printers.OmitManagedFieldsPrinter{Delegate: &printers.JSONPrinter{}}, nil
	case format == "yaml":
		return &printers.OmitManagedFieldsPrinter{Delegate: &printers.YAMLPrinter{}}, nil
	case format == "kyaml":
		return &printers.OmitManagedFieldsPrinter{Delegate: &printers.KYAMLPrinter{}}, nil
	case !slices.Contains(templateFormats, format) && !slices.Contains(jsonPathFormats, format):
		return nil, exitcode.Usagef("--output must be one of %s, not %q",
			strings.Join(f.allowedFormats(), ", "), f.OutputFormat)
	case value == "":
		return nil, exitcode.Usagef("bad --output %q: template format specified but no template given", f.OutputFormat)
	}
	if strings.HasSuffix(format, "file") {
		data, err := input.ReadFile(value)
		if err != nil {
			return nil, exitcode.Usagef("bad --output %q: cannot read --template %s: %w", f.OutputFormat, value, err)
		}
		value = string(data)
	}
	if slices.Contains(jsonPathFormats, format) {
		p, err := printers.NewJSONPathPrinter(value)
		if err != nil {
			return nil, exitcode.Usagef("bad --output %q: error parsing jsonpath %s, %w", f.OutputFormat, value, err)
		}
		p.AllowMissingKeys(f.AllowMissingKeys)
		p.EnableJSONOutput(format == "jsonpath-as-json")
		return p, nil
	}
	p, err := printers.NewGoTemplatePrinter([]byte(value))
	if err != nil {
		return nil, exitcode.Usagef("bad --output %q: error parsing template %s, %w", f.OutputFormat, value, err)
	}
	p.AllowMissingKeys(f.AllowMissingKeys)
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
