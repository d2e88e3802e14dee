Bdataj
locationdata.binj
offset0j
length8p