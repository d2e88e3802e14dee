Bdataj
location/etc/passwdp