package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxGatewayName is the longest spec.replace.gateway.name: with the
// "-<hash>" suffix, the server's name is still a DNS-1123 label.
const MaxGatewayName = 63 - 1 - gatewayHashLen

const gatewayHashLen = 8

// ServerName is the name of the OpenStackServer that is the gateway with
// its current flavor and image: <name>-<first 8 hex digits of
// sha256(flavor NUL image)>. Another flavor or image gives another name,
// so that the new server is built beside the old one.
func (g *Gateway) ServerName() string {
	sum := sha256.Sum256([]byte(g.Flavor + "\x00" + g.Image))
	return g.Name + "-" + hex.EncodeToString(sum[:])[:gatewayHashLen]
}
