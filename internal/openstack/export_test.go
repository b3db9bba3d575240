package openstack

// SetServerPage makes Servers ask for pages of n servers, until the
// returned function restores the page size.
func SetServerPage(n int) (restore func()) {
	old := serverPage
	serverPage = n
	return func() { serverPage = old }
}
