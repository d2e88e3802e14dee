Bdataj
location../../MANIFEST.tomlp