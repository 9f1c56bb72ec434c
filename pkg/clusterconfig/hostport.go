package clusterconfig

import (
	"errors"
	"fmt"
	"net"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// Ports and endpoints read from text the way kubeadm reads them: a port is
// decimal digits only (no sign, no spaces, no base prefix), 1-65535.

// parsePort parses a TCP port as kubeadm's ParsePort does.
func parsePort(port string) (int, error) {
	n, err := netutils.ParsePort(port, true)
	if err == nil && n >= 1 && n <= 65535 {
		return n, nil
	}
	return 0, errors.New("port must be a valid number between 1 and 65535, inclusive")
}

// parseHostPort splits "host[:port]" as kubeadm's ParseHostPort does: the
// host an IP address or a DNS subdomain, the port (if any) as parsePort.
func parseHostPort(hostport string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, "" // no port: all of it is the host
	}
	if port != "" {
		if _, err := parsePort(port); err != nil {
			return "", "", fmt.Errorf("port %s must be a valid number between 1 and 65535, inclusive", port)
		}
	}
	if netutils.ParseIPSloppy(host) != nil || len(validation.IsDNS1123Subdomain(host)) == 0 {
		return host, port, nil
	}
	return "", "", fmt.Errorf("host '%s' must be a valid IP address or a valid RFC-1123 DNS subdomain", host)
}

// validateEndpoint checks controlPlaneEndpoint.
func (s *spec) validateEndpoint(r *Report) {
	if s.controlPlaneEndpoint == "" {
		return
	}
	if _, _, err := parseHostPort(s.controlPlaneEndpoint); err != nil {
		r.addFieldErrors(field.ErrorList{field.Invalid(field.NewPath("controlPlaneEndpoint"), s.controlPlaneEndpoint, err.Error())})
	}
}
