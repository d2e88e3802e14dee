Bdataj
locationdata.binj
offset8j
length16p