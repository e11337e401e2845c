package proxy

// RawSite lends oneshot_test.go's loopback site to the package's external
// tests.
var RawSite = rawSite
