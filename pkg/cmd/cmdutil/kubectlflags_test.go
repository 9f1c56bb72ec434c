package cmdutil

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// The connection flags are kubectl's: every flag cli-runtime's ConfigFlags
// adds is there, with its shorthand, type, default and help; the plugin's
// own differ only where it says so (kube-system, no cache).
func TestConnectionFlagsAreKubectls(t *testing.T) {
	want := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(false).AddFlags(want)
	cmd := &cobra.Command{Use: "plugin"}
	NewClusterFlags().AddFlags(cmd)
	got := cmd.PersistentFlags()
	ours := map[string]string{"namespace": "kube-system", "cache-dir": ""}
	want.VisitAll(func(w *pflag.Flag) {
		g := got.Lookup(w.Name)
		if g == nil {
			t.Errorf("--%s is missing", w.Name)
			return
		}
		def, ok := ours[w.Name]
		if !ok {
			def = w.DefValue
		}
		if g.Shorthand != w.Shorthand || g.Value.Type() != w.Value.Type() || g.DefValue != def || g.Usage != w.Usage {
			t.Errorf("--%s: got -%s %s %q %q, want -%s %s %q %q", w.Name,
				g.Shorthand, g.Value.Type(), g.DefValue, g.Usage, w.Shorthand, w.Value.Type(), def, w.Usage)
		}
	})
	got.VisitAll(func(g *pflag.Flag) {
		if want.Lookup(g.Name) == nil && g.Name != "configmap" {
			t.Errorf("--%s is not kubectl's", g.Name)
		}
	})
}

const twoContexts = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: {server: "https://127.0.0.1:6443"}
- name: b
  cluster: {server: "https://127.0.0.2:6443"}
users:
- name: a
  user: {token: token-a}
contexts:
- name: a
  context: {cluster: a, user: a, namespace: default}
- name: b
  context: {cluster: b, user: a}
`

// The flags change the REST configuration as kubectl's do, --as-user-extra
// included; the kubeconfig's namespace never replaces kube-system.
func TestRESTConfigFromFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) *ClusterFlags {
		t.Helper()
		f := NewClusterFlags()
		cmd := &cobra.Command{Use: "plugin"}
		f.AddFlags(cmd)
		if err := cmd.PersistentFlags().Parse(append([]string{"--kubeconfig", kubeconfig}, args...)); err != nil {
			t.Fatal(err)
		}
		return f
	}

	f := parse()
	cfg, err := f.RESTConfig()
	if err != nil || cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "token-a" || f.Namespace() != "kube-system" {
		t.Fatalf("defaults: %v %q %q %q", err, cfg.Host, cfg.BearerToken, f.Namespace())
	}

	f = parse("--context", "b", "--token", "token-x", "--as", "system:node:cp-0", "--as-group", "system:nodes",
		"--as-user-extra", "k=v", "--as-user-extra", "k=w", "--as-user-extra", "no-equals", "--request-timeout", "7s",
		"--tls-server-name", "api.example", "-n", "namespaces/other")
	cfg, err = f.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	extra, _ := json.Marshal(cfg.Impersonate.Extra)
	if cfg.Host != "https://127.0.0.2:6443" || cfg.BearerToken != "token-x" || cfg.Impersonate.UserName != "system:node:cp-0" ||
		strings.Join(cfg.Impersonate.Groups, ",") != "system:nodes" || string(extra) != `{"k":["v","w"]}` ||
		cfg.Timeout != 7*time.Second || cfg.ServerName != "api.example" || f.Namespace() != "other" {
		t.Errorf("flags: %q %q %+v %s %v %q %q", cfg.Host, cfg.BearerToken, cfg.Impersonate, extra, cfg.Timeout, cfg.ServerName, f.Namespace())
	}

	f = parse("-s", "https://127.0.0.3:6443")
	if cfg, err = f.RESTConfig(); err != nil || cfg.Host != "https://127.0.0.3:6443" {
		t.Errorf("-s: %v %v", err, cfg)
	}
}

// Without a kubeconfig the server is kubectl's default, as with kubectl.
func TestRESTConfigWithoutKubeconfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	want, werr := genericclioptions.NewConfigFlags(false).ToRESTConfig()
	got, gerr := NewClusterFlags().RESTConfig()
	if (werr == nil) != (gerr == nil) || (gerr == nil && got.Host != want.Host) {
		t.Errorf("got %v %v, want %v %v", got, gerr, want, werr)
	}
}

// Every output format prints what kubectl's own print flags print, for
// each way of giving a template.
func TestPrintFlagsAreKubectls(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goTmpl, jsonPath := file("go", "{{.kind}}/{{.spec.n}}"), file("jp", "{.spec.items[*]}")
	result := []byte(`{"kind":"Result","spec":{"n":3,"items":["a","b"]},"metadata":{"managedFields":[{"manager":"x"}]}}`)
	for _, tc := range []struct {
		output, template string
		strict           bool
	}{
		{"json", "", false}, {"yaml", "", false}, {"kyaml", "", false}, {"JSON", "", false},
		{"go-template={{.kind}}", "", false}, {"go-template", "{{.spec.n}}", false}, {"template={{.kind}}", "", false},
		{"go-template-file", goTmpl, false}, {"templatefile=" + goTmpl, "", false},
		{"jsonpath={.spec.n}", "", false}, {"jsonpath", "{.kind}", false}, {"jsonpath-as-json={.spec.items}", "", false},
		{"jsonpath-file", jsonPath, false}, {"jsonpath={.missing}", "", false},
		{"jsonpath={.missing}", "", true}, {"go-template={{.missing.x}}", "", true},
	} {
		t.Run(tc.output+" "+tc.template, func(t *testing.T) {
			wp, err := kubectlPrinter(tc.output, tc.template, !tc.strict)
			if err != nil {
				t.Fatal(err)
			}
			got := &PrintFlags{OutputFormat: tc.output, Template: tc.template, AllowMissingKeys: !tc.strict}
			var wb, gb bytes.Buffer
			werr := wp.PrintObj(&runtime.Unknown{Raw: result, ContentType: runtime.ContentTypeJSON}, &wb)
			gerr := got.Print(&gb, result)
			if gb.String() != wb.String() || (gerr == nil) != (werr == nil) {
				t.Errorf("got %q %v, want %q %v", gb.String(), gerr, wb.String(), werr)
			}
		})
	}
}

// A format kubectl does not know, a template format without a template
// and an unreadable template file are usage errors.
func TestPrintFlagsRefuse(t *testing.T) {
	for _, f := range []PrintFlags{
		{OutputFormat: "wide"}, {OutputFormat: "go-template"}, {OutputFormat: "jsonpath="},
		{OutputFormat: "jsonpath-file", Template: filepath.Join(t.TempDir(), "none")},
		{OutputFormat: "go-template={{.x"}, {OutputFormat: "jsonpath={.x"},
	} {
		if _, err := f.ToPrinter(); err == nil || !strings.Contains(err.Error(), "--output") {
			t.Errorf("%+v: got %v", f, err)
		}
	}
}

// kubectlPrinter is the printer cli-runtime's print flags choose.
func kubectlPrinter(output, template string, allowMissingKeys bool) (printers.ResourcePrinter, error) {
	if p, err := genericclioptions.NewJSONYamlPrintFlags().ToPrinter(output); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	f := genericclioptions.NewKubeTemplatePrintFlags()
	*f.TemplateArgument, *f.AllowMissingKeys = template, allowMissingKeys
	return f.ToPrinter(output)
}
