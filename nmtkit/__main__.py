from nmtkit.launch import nmtkit

nmtkit()
