ByJ
Dðÿ™D´KD»