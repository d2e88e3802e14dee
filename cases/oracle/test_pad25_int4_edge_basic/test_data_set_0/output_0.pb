ByJ
Dd&""w—yw™