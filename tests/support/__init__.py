"""Test-only helpers: a misbehaving loopback server and factories for inputs."""
