package postgres

// OpenReadOnlyUnwrapped is OpenReadOnly without the dedupe.ReadOnly guard,
// so that a test can see that the server refuses the session's writes too.
var OpenReadOnlyUnwrapped = openReadOnly
