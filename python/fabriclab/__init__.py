"""fabriclab"""
