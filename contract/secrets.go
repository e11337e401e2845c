package contract

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func (c *sigCompiler) noSecrets() {
	for _, f := range []struct{ field, v string }{
		{"secret_env", c.cfg.SecretEnv}, {"secret_file", c.cfg.SecretFile},
		{"previous_secret_env", c.cfg.PreviousSecretEnv}, {"previous_secret_file", c.cfg.PreviousSecretFile},
	} {
		if f.v != "" {
			c.bad(f.field, "scheme %s takes no secret", c.cfg.Scheme)
		}
	}
	if len(c.cfg.Secrets) > 0 {
		c.bad("secrets", "scheme %s takes no secret", c.cfg.Scheme)
	}
}

func (c *sigCompiler) resolveSecrets() {
	add := func(k []byte, envField, fileField, file string) {
		if k == nil {
			return
		}
		c.keys = append(c.keys, k)
		if file != "" {
			c.keyFields = append(c.keyFields, fileField)
		} else {
			c.keyFields = append(c.keyFields, envField)
		}
	}
	// secret_env/secret_file is required unless secrets lists them.
	add(c.resolve("secret_env", "secret_file", c.cfg.SecretEnv, c.cfg.SecretFile, len(c.cfg.Secrets) == 0),
		"secret_env", "secret_file", c.cfg.SecretFile)
	for i, src := range c.cfg.Secrets {
		env, file := fmt.Sprintf("secrets[%d].secret_env", i), fmt.Sprintf("secrets[%d].secret_file", i)
		if src.SecretEnv == "" && src.SecretFile == "" {
			c.bad(env, "required: secret_env or secret_file")
			continue
		}
		add(c.resolve(env, file, src.SecretEnv, src.SecretFile, true), env, file, src.SecretFile)
	}
	add(c.resolve("previous_secret_env", "previous_secret_file", c.cfg.PreviousSecretEnv, c.cfg.PreviousSecretFile, false),
		"previous_secret_env", "previous_secret_file", c.cfg.PreviousSecretFile)
}

func (c *sigCompiler) resolve(envField, fileField, env, file string, required bool) []byte {
	var raw string
	switch {
	case env != "" && file != "":
		c.bad(envField, "set either %s or %s, not both", envField, fileField)
		return nil
	case env != "":
		val, ok := c.env(env)
		if !ok {
			c.bad(envField, "environment variable %s is not set", env)
			return nil
		}
		raw = val
	case file != "":
		path := file
		if !filepath.IsAbs(path) && c.dir != "" {
			path = filepath.Join(c.dir, path)
		}
		data, err := readSecretFile(path)
		if err != nil {
			c.bad(fileField, "read secret: %v", err)
			return nil
		}
		raw = string(data)
	default:
		if required {
			c.bad("secret_env", "required: secret_env or secret_file")
		}
		return nil
	}
	raw = strings.TrimSpace(raw)
	where := envField
	if file != "" {
		where = fileField
	}
	if raw == "" {
		c.bad(where, "the secret is empty")
		return nil
	}
	if !c.def.whsec {
		return []byte(raw)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(raw, "whsec_"))
	if err != nil || len(key) == 0 {
		c.bad(where, "not a standard-webhooks secret (whsec_ followed by base64)")
		return nil
	}
	return key
}

// maxSecretFile bounds what is read from a secret file: a secret is short,
// and a wrong path (a device, a log) must not be read whole.
const maxSecretFile = 64 << 10

func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.New(pathErr(err, path))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, errors.New(pathErr(err, path))
	}
	if len(data) > maxSecretFile {
		return nil, fmt.Errorf("%s: larger than %d bytes, not a secret", path, maxSecretFile)
	}
	return data, nil
}

// pathErr keeps the OS's reason (no such file, permission denied) without
// repeating the path twice in the message.
func pathErr(err error, path string) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return path + ": " + pe.Err.Error()
	}
	return err.Error()
}
