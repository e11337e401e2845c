package proxy

// RawSite lends oneshot_test.go's loopback site (rawSite) to the package's
// external tests (earlyanswer_test.go, keepidle_test.go).
var RawSite = rawSite
